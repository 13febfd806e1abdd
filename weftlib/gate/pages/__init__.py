"""What notebooks 05 and 06 show of a run's graphs, gated, paired, fixed and cut (`run` computes them): the
tables (`gate_tables`, `cut_tables`, `fix_tables`), the pictures (`plots`, in the colours of `colours`) and the
sentences (`gate_sentences`, `cut_sentences`); and what each `python -m weftlib.gate` command prints last
(`command_lines`: its totals and the next step)."""
