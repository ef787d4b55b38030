"""Tests: a package, so each module has one name (tests.<folder>.<module>) and none can shadow another."""
