"""Test-wide settings: pygame draws headless."""
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
