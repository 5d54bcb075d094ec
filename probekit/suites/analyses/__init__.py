"""Built-in suite analyses: every module here registers one ``[[section]]`` when imported.

Add an analysis by adding a module with a frozen spec dataclass and a
``@register_analysis("name", spec=Spec)`` run function (see docs/architecture.md).
"""
