"""The word student: token ids through a small network, exported to ONNX."""
