"""The accounting-log ingester (installed as ``softwalltime_ingest``)."""
