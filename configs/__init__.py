"""Shipped configuration files (task suite, presets), installed as simpact.configs."""
