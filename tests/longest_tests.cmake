# The longest GoogleTest cases, each with its seconds in a Release run on 2
# cores as its COST: ctest -j2 starts the costliest first. A fresh clone (CI)
# has no measured times (Testing/Temporary/CTestCostData.txt) and would run
# the cases in declaration order, ending on a long one while the other core
# idles. Only the order changes: a case missing here (renamed, new) runs as
# before. CTestTestfile.cmake includes this after the discovered cases
# (tests/CMakeLists.txt); the plain tests set their COST beside add_test().
foreach(name_cost IN ITEMS
    "KillResume.RandomSigkillsThenResumeEndLikeAnUninterruptedRun;43"
    "PlotScripts.HeadsDrawsConcatCollaborativeAndMixedCheckpoints;9"
    "Cli.PlotDrawsThePngOfARun;8"
    "CompressFinetune.CompressesScoresFinetunesTabulatesAndResumes;7"
    "SweepCli.ARunOfADifferentRecipeIsRefusedOrRerun;6"
    "HeadMaskCli.EvalMasksHeadsAndHeadsRanksThem;6"
    "SweepCli.RunsEveryPointTabulatesAndResumes;5"
    "EmulatedAsync.ABenchStepMakesNoHostWait;5"
    "PlotScripts.SweepDrawsAPercentMetricAgainstAGridKey;4")
  list(GET name_cost 0 name)
  list(GET name_cost 1 cost)
  set_tests_properties("${name}" PROPERTIES COST ${cost})
endforeach()
