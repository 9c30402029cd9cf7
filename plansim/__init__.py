"""plansim: offline workbench for planning LLM serving capacity."""

__version__ = "0.1.0"
