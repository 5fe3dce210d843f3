"""Message declarations, one module per API family."""
