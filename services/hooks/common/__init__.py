"""What both sides of the plugin wall import (docs/architecture.md, "The plugin boundary"): tables, constants,
markers and small types, no plugin code and no host code. The host side (services/hooks/*.py) and the plugin
side (services/hooks/plugin_side/, what runs where plugin code runs) may import this package; it imports neither.
"""
