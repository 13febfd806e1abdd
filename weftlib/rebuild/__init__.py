"""The vendor's model-zoo networks (and the record's cases) rebuilt by their real exporters, with random weights.

The DFC parsed exporters' graphs, so a rule is judged on what Ultralytics, timm, torchvision and transformers
write, not on a hand-built likeness: each recipe (`recipes`) builds its model from a config (nothing
downloaded), exports it at the zoo's input shape and opset, simplifies it as the source did, and cuts it at the
zoo's parser nodes (`cutting`), cached by exporter version, model, shape and opset (`cache`). The gate reads
the cut ONNX files; this package is the only one that imports the exporters, so it sits beside the question
packages, above the gate (the gate never imports torch).
"""
