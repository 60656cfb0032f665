"""The console's pages: interfaces over the approval port, the selectors and the models."""
