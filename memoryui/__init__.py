"""memoryui: inspect, repair and tune the long-term memory of AI agents."""

# The release, as pyproject.toml's [project] version says (a test holds them equal): the MCP server
# names it in its serverInfo, the API in its schema, the settings in the user agent.
__version__ = "0.1.0"

__all__ = ["__version__"]
