#!/bin/sh
git diff --stat HEAD
