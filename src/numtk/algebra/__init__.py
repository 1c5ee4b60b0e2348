"""
Squarefree monomial ideals and the algebraic Hirsch problem (placeholder: filled by issue 25).
"""

__all__: list = []
