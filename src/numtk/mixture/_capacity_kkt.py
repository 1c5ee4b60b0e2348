"""Placeholder: being written."""

