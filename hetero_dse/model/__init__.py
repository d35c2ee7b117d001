"""Whole networks: built-in architectures (``zoo``) and their capture as the tool's operators (``capture``)."""
