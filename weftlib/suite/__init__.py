"""Running, checking and publishing the notebooks; nothing here knows about attention or voxels.

- `params`: the plan files (`params/*.yaml`), validated before anything runs;
- `runner`: papermill over the plan, with progress, a state file and the run folder;
- `publish`: the HTML index, the appendix folder and the RFD page;
- `record`: what a notebook records (`Recorder`) and how values read as headline figures;
- `provenance`: versions, machine and commit, kept with every run.
"""
