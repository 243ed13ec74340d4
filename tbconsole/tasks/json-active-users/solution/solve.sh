#!/bin/bash
jq -r '.[] | select(.active == true) | .name' /app/users.json | sort > /app/active_users.txt
