# mkdelta.sh BASE_SLIM FULL_SLIM OUT_DELTA: the files of FULL that differ from BASE's
set -e; rm -rf $3; mkdir -p $3
(cd $2 && find . -type f) | while read f; do cmp -s $1/$f $2/$f || { mkdir -p $3/$(dirname $f); cp $2/$f $3/$f; }; done
