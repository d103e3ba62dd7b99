"""Sentence encoders: ONNX inference, export, int8, the catalogue, PyTorch, classifiers."""
