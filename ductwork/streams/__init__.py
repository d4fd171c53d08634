"""The registry of streams (``ductwork.streams.registry``): every stream the mirror keeps,
declared once as data (``model``), one module per upstream family."""
