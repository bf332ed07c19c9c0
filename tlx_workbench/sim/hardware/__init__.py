"""The simulated hardware's state: a CTA (``cta``), its mbarriers and named barriers, SMEM, the host tensors TMA
copies read, cluster shapes and cluster launch control."""
