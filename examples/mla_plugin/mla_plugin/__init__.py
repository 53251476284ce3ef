"""Example traceattr backend plug-in: a plain-torch MLA decode (see torch_mla.py)."""
