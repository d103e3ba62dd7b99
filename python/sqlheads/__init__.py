"""sqlheads: text classification inside the database."""

__version__ = "0.1.0"
