"""An instrumented split-KV MLA decode in Triton (see backend.py and kernels.py)."""
