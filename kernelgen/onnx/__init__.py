"""Importers: ONNX models in (graph reading, fusion groups, quantized forms) and onnxruntime as an oracle."""
