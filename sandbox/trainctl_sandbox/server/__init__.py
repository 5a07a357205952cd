"""The sandbox server itself: its process, the WSGI middleware in front of moto, the request checks every
call passes, and what a fresh account holds. Imports nothing on purpose: `trainctl sandbox up` reads
process.py without paying for moto."""
