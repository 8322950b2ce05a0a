"""Dry-run stand-in for safetensors.torch (torch.save underneath; see ../README.md)."""
import torch


def save_file(tensors, path, metadata=None):
    torch.save({"tensors": tensors, "metadata": metadata}, path)


def load_file(path):
    return torch.load(path)["tensors"]
