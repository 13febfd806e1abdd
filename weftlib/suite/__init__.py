"""Running, checking and publishing the notebooks; nothing here knows about attention or voxels.

- `params`: the plan files (`params/*.yaml`), validated before anything runs; `schema`: what each parameter may hold;
- `runner`: papermill over the plan, as a pipeline of named steps; `kernel`: the Jupyter kernel it starts;
  `progress`: progress lines and the time left; `failures`: what a failed notebook's error record says;
- `runfolder`: the run folder's records (state.json and summary.json), written and read there;
- `record`: what a notebook records (`Recorder`) and how values read as headline figures;
- `answers`: the answer table; `index_page`: the run index; `notebook_html`: each notebook's page;
  `pages`: the jinja2 templates they render from (templates/);
- `appendix`: the published copy of a passing run, swapped in one rename;
- `publish`: the RFD figure page;
- `provenance`: versions, machine and commit, kept with every run; `capabilities`: which notebooks run fully
  here; `files`: atomic writes and the publish lock.
"""
