"""What runs where: a graph cut into device and host segments (partition, merge), the cut's records (segments),
its coverage, and the proof that the chain of segments equals the graph in onnxruntime."""
