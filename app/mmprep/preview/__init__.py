"""`mmprep preview`: contact sheets of the frames the service would sample, from the command line."""
