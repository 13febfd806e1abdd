"""What the DFC's parser is predicted to do with a graph: the formats it tracks, what a Reshape does to the axes,
the graph rules, the node-by-node prediction, the device gate over a file, the prediction in words, and the gate
held to the public record (backtest)."""
