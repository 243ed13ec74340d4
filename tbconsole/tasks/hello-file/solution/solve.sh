#!/bin/bash
printf 'Hello, Terminal-Bench!\n' > /app/greeting.txt
