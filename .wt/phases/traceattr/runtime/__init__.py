"""The GPU side a decode loop loads: a dispatch table read into typed records, static per-step buffers,
one CUDA graph per (arm, batch size), and a per-step choice of arm from the batch's seq_lens.

Layers: runtime may import ``core`` and ``backends`` only; ``jobs`` and ``cli`` drive it. Modules that
need no GPU (``table``, ``select``, ``metadata``, ``trajectory``, ``dispatcher``) import no torch, so a
machine without one can read tables, choose arms and test the buffer logic.
"""
