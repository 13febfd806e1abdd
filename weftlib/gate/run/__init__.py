"""A run's graphs, gated, packed, paired, cut and fixed: the computing and the files behind notebooks 05 and 06
(`gating`, `cutting`, `fixing`). What those notebooks show of it (tables, pictures, sentences) is `pages`, above."""
