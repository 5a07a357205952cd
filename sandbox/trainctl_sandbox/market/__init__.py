"""The seedable Spot market and the APIs that read it: Spot prices and placement scores, the Price List
API, Service Quotas."""
