"""The neutral ONNX core every question uses: it knows ONNX, not attention, voxels or the allowlist.

- `walk`: read a graph defensively and walk it (standard domains, producers, constants, ranks);
- `opset`: the opset 18 -> 17 rewrite; `export`: the one place that calls `torch.onnx.export`, with a parity
  side file, over `exporter_registry` (torch's op table built once per process); `inventory`: what a graph
  holds (op counts, Gathers with run-time indices, largest tensors, file summaries); `layout`: the rank-4
  device layout's shared record; `compare`: the largest difference of two sets of outputs; `runtime`:
  onnxruntime sessions; `tracing`: whether a call is being traced; `origins`: the torch module each node
  came from;
- `view`: the one entry a notebook calls to look at a graph, over `graph_drawing` (its first nodes drawn: a
  self-contained SVG, a matplotlib figure) and `netron_viewer` (netron, offline, served by the Jupyter server).

This `__init__` imports nothing, so `weftlib.gate` can read graphs without importing torch.
"""
