"""The compiler loop: the DFC run or its command (dfc_runner, dfc_log: what the DFC image carries, with the gate's
`vocabulary`, importing nothing else of the suite), the pack of graphs for one DFC session, its results, the pairing of the gate with
the DFC, and the probes that ask the DFC what the record leaves unjudged."""
