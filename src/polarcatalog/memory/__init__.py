"""PolarMem (paper 000): polarized HAS / NOT_HAS graph memory and lexicographic logic-aware retrieval.

So far: the adaptive partition (Eqs. 2-3) and Algorithm 1's logic states with hard / soft ordering.
Proposers, verifiers, the graph itself and the graph stage are the rest of the PolarMem issue.
"""
