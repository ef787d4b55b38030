"""Experiment 4 placeholder replaced below."""
