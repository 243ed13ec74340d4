#!/bin/bash
tail -n +2 /app/people.csv | cut -d, -f3 > /app/emails.txt
