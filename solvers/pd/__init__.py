"""Projective dynamics in PyTorch (Bouaziz et al. 2014): a rope as a chain of particles with stretch and
bending constraints, batched over candidate plans. Import :mod:`solvers.pd.rope` inside the function that
needs it (it imports torch)."""
