"""The commands: `gpu-admission` and `kubectl gpu-admission` (main.py), offline validate and lint
(offline.py). Sits on top of everything: it may import any part of the edge.
"""
