"""Build the page for PyTorch's 'backward through the graph a second time' error."""
