"""ductwork: a complete, always-fresh mirror of the HVAC catalog, warehouse and CRM service."""
