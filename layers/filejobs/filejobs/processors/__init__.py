"""Processors turn an object's bytes into a job's result."""
