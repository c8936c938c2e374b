"""The maiden application: config, composition and the command line."""

from .config import LoadedConfig, MaidenConfig, load_config, parse_config

__all__ = ["LoadedConfig", "MaidenConfig", "load_config", "parse_config"]
