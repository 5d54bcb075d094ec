"""Built-in measurement kinds; every module here registers itself when the registry loads."""
