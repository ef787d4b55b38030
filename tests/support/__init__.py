"""The test kit shared by every test folder: waiting on conditions, reading plans, recorded API calls."""
