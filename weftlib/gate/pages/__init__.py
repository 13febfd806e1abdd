"""What notebooks 05 and 06 show: the tables, sentences and pictures over a run's graphs, gated, paired, fixed and
cut."""
