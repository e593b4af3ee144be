"""Installed copy of the project's roles/ and templates/ (see bringup.project)."""
